"""The drill: the synthesized RayCluster, RayJobs and RayService run on real Ray, SkyRL and Ray Serve, offline,
on 127.0.0.1, up to the first step that needs a GPU (`python -m drill`, `make drill`)."""
