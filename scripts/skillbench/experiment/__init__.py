"""What a user declares: config checks and YAML reading, the task suite, arms and their pairing, the
Agent Skills format, candidate overlays. Imports only `skillbench.base`; never runs anything."""
