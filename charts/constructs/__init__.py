"""Small typed constructs the charts compose: KubeRay objects and Ray pod templates."""
