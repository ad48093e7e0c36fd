"""Values built from the configuration for the apps and the command line: the add-ons' Helm values, the publish
Job, the image build commands, the alerting rules, the stack outputs contract and the synthesized manifests'
fingerprint. Each is computed here once and passed to the CDK app, the cdk8s app and `skyrl-hp`."""
