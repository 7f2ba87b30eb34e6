#!/bin/bash
printf '# Notes\n\nCreate greeting.txt holding exactly: hello, world\n' > notes.md
