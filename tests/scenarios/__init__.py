"""Scenarios across the whole stack, on every cluster: Storm's integration scenarios
(test_storm_scenarios.py) and the reliability transcripts (test_transcripts.py, with
their table in transcripts.py).

They are a folder of their own, not a mirror of one package, because what they test is
the promise all the layers make together (topology, reliability, runtime, both clusters
and distributed/ under SparkCluster), through the ``any_cluster`` fixture of
tests/conftest.py and the harness in tests/clusters.py; filed under any one package
they would hide that the other clusters run them too. The harness stays at the top of
tests/ because tests of single packages use it as well (windowing's, rebalance's).
"""
