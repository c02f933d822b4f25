"""The broker's domain services, one concept a module; each holds the `Core` and acts through its scripts."""
