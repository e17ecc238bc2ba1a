"""An end-to-end quality benchmark on a web the product's tests did not write.

``hosts`` (what each host does), ``truth`` (pages, values, change events), ``content`` (the HTML,
robots.txt, sitemaps and feeds served), ``server`` (the web on loopback, with its request log),
``score`` (freshness and politeness from the truth and that log), ``baselines`` (round robin,
Nutch-style adaptive and an oracle, simulated in memory), ``product`` (the product driven through
its CLI and views) and ``report`` (tables). ``benchmarks/e2e_quality.py`` is the command.
"""
