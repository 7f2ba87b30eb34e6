"""Evolving the skills: the proposer's bounded evidence bundle, the proposer session, and applying a
promotion to the repository. Imports the packages below it."""
