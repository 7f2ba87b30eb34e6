"""The base every other package stands on: canonical artifacts and their schemas, the records that
cross modules, the one owner of every results path, errors, redaction, managed processes and rule
logs. Imports nothing else of skillbench."""
