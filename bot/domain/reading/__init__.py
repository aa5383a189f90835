"""What a reading of the fleet means: the judgement made once per reading, its causes, the
runbook's diagnostics, the early warning and the capacity report."""
