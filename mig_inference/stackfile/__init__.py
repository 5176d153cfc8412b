"""Stack files read as Pulumi reads them: gopkg.in/yaml.v3's rules, and the config encoding the
engine hands a program (`mig_inference.spec.files` turns a stack file into a StackSpec)."""
