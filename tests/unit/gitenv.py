"""The one git environment of the unit tests' fixture repositories: no user or system git config, a fixed identity.

Unit test modules import it as `gitenv` (pytest puts their folder on sys.path); the workflow tests have theirs
in tests/workflow/conftest.py. A test that needs more (its own HOME, a narrower PATH) extends a copy.
"""

from __future__ import annotations

import os

GIT_ENV = {
    "PATH": os.environ["PATH"],
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
