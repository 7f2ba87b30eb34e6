"""What a user declares: config checks and YAML reading, the task suite, arms and their pairing, the
Agent Skills format, candidate overlays, and the typed settings a session job reads of the config. Imports only
`skillbench.base`; never runs anything."""
