#!/bin/bash
# Harbor's verifier: the reward goes to /logs/verifier/reward.txt.
cd /app
python3 -m pytest -q -p no:cacheprovider /tests/test_wc.py
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
