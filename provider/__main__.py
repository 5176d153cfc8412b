"""Entry point of the mig-inference provider plugin (see PulumiPlugin.yaml)."""

from mig_inference.components.provider import serve

if __name__ == "__main__":
    serve()
