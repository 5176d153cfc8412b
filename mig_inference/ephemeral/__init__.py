"""`mig-inference ephemeral up|verify|destroy`: an ephemeral test stack brought up within its
budget and TTL, its services proven to answer, and destroyed, on Pulumi's Automation API.

`budget` and `expiry` are pure (the cost guard, the stack tags); `report` reads what Pulumi
and the verify Jobs left; `driver` is the only module that talks to the Pulumi CLI; `command`
is the verb's command line (imported lazily by `mig_inference.cli`)."""
