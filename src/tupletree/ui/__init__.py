"""The web view of a running cluster: Storm UI's REST API, Prometheus metrics at
``/metrics`` and a page at ``/``, started by ``LocalCluster(ui_port=...)`` or
``SparkCluster(ui_port=...)`` (``cluster.ui_url``).

Modules: ``graph`` (a topology as nodes and edges; Mermaid and DOT), ``history`` (the
bounded recent past: rates, capacity, the chart's timeline), ``views`` (the REST
answers as plain values), ``prometheus`` (the scrape-time collector), ``app`` (the
aiohttp routes), ``service`` (the server and its sampler), ``client`` (what the CLI
calls), ``static/`` (the page: hand-written HTML, CSS, JS; nothing to build).
"""
