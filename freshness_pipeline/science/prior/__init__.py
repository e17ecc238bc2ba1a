"""Nonparametric empirical-Bayes change model: a prior learned from every page's
interval-censored history, over Poisson rates and over clock-driven (periodic) change.

Why: a single Gamma prior per class scores a page with one or two fetches close to the prior
mean, while the real population is extremely heavy-tailed (cho2000: 30 % of pages change less
than once in four months, 5 % faster than 4/day). The population itself says
what a thin history most likely means: "unchanged after 3 days" on a web where a third of the
pages are nearly static is strong evidence of a static page, and "changed after 2 days" spreads
over the fast and the medium bands in the proportions those bands really have.

And many pages do not change at random times at all: a daily digest rebuilt at 06:00, a
listing refreshed every 12 hours, a weekly column. For such a page *when* we fetch matters
more than how often: fetched just after its update it stays fresh for a whole period, fetched
just before it for minutes, at the same cost. A Poisson model cannot say this (it is
memoryless); the periodic components below can.

Model. A page follows one of C components:

* Poisson at a rate λ_g on a fixed grid λ_1 < … < λ_G (default 48 log-spaced points from 1e-4
  to 100 changes/day). A history of (interval Δ, changed?) pairs has the censored likelihood
  L(λ) = Π_unchanged e^{−λΔ} · Π_changed (1 − e^{−λΔ}) (Cho & Garcia-Molina, ACM TOIT 2003);
* periodic with period P (:class:`Period`, default every 3, 4, 6, 8 or 12 h, day or week):
  one change at a fixed phase φ of every period (a time of day, or of the week). The phase is
  resolved to bins and is uniform a priori. An observation over (s, e] "should" show a change
  iff some φ + kP lies in (s, e]; it agrees with that with probability 1 − ε (``mismatch`` ε:
  jitter, an unscheduled edit, a skipped run). Each observation that contradicts a phase costs
  it a factor ε/(1 − ε), so a few fetches pin the phase of a clock-driven page and rule the
  clock out for others.

Per URL class the prior is a weight vector π over the C components (G + number of periods
numbers summing to 1; small enough to store per class and host, see :func:`refit_change_prior`).
A page's posterior is post_c ∝ π_c L_c, with L_c for a periodic component the likelihood
averaged over its phase bins. The weights are the nonparametric maximum-likelihood mixing
distribution (Laird 1978), fit by EM over all pages' histories: π_c ← mean over pages of
post_c. EM runs a few iterations per cycle, warm-started from the previous cycle's weights
(the data change little between cycles). Periodic components start at a total weight of
``periodic_start`` (1e-3): on a web without clocks they would otherwise explain the thin
histories of the first cycles as well as the Poisson rates do and distort the first weeks,
while on a web with clocks the evidence of a few consistent fetches grows them within days.
A class with little data is pulled towards the global weights: its M-step adds ``shrinkage``
pseudo-pages distributed as the global π (a Dirichlet prior centred on the global fit), so a
class of 50 pages is mostly global and a class of 50,000 mostly its own.

From the posterior, per page (:func:`posterior_summary`):

* ``change_rate`` = posterior mean rate (a periodic component counts 1/P), ``rate_median`` =
  its posterior median; url_state reports both (:func:`posterior_rates`);
* ``expected_index``: the freshness a fetch now is worth, averaged over the posterior. For a
  Poisson component it is the Lagrangian index W(λ, a) = (1/λ) g(λa), g(r) = 1 − (1 + r)e^{−r}
  of :mod:`freshness_pipeline.science.schedule`, at the page's age a; for a periodic component
  with phase φ it is [a change point φ + kP fell since the last fetch] × (time until the next
  one): the days of freshness the fetch buys, zero if the copy is still current;
* ``expected_capture`` = P(the page changed since its last fetch), the same for the "capture"
  objective.

The assets use the table-level functions: url_state refits the prior each cycle with
:func:`refit_change_prior` (stored per host and class in the ``change_prior`` table, so the next
cycle warm-starts) and reports each page's rate under it with :func:`posterior_rates`,
revisit_plan scores each candidate under it with :func:`posterior_gains` (the column its
planning objective ranks by becomes ``expected_gain_override`` for ``build_plan``). Phases need the absolute time of each observation:
the histories store only intervals, chained back from ``last_seen_at`` (the end of the newest
observation). A successful fetch that records no observation (a re-extraction after an
extractor upgrade) breaks that chain once; the older observations then sit one interval off,
which the mismatch probability absorbs until newer ones outweigh them.

Old observations can be discounted as in :mod:`freshness_pipeline.science.estimate` (column
``obs_half_life_days`` or ``HALF_LIFE_DAYS``): each log-likelihood term then counts
2^(−age/h), age measured back from the page's newest observation. Off by default (see
docs/scheduling.md for what it buys and costs).

Content ages (``AGE_COLUMN``, from a trusted Last-Modified header): a changed observation over
(s, e] whose content is known to be a days old at e says the last change was at x = e − a and
none followed. It is scored as a density per day by every component, so that they stay
comparable: a Poisson rate by λ e^{−λa} (instead of 1 − e^{−λΔ}); a clock phase by
(1 − ε)/(2w) when x lies within one bin width w of one of its change points (the two nearest
bins), ε/max(P, Δ) otherwise or when a >= P (the clock would have ticked again since).
Scoring the Poisson rates by the density and the clocks by a probability mixes units and hands
pages to the wrong kind of component (the benchmark fell from 0.97 to 0.88 of the oracle that
way). The mismatch is spread over the interval, not over one period: at ε/P an interval of Δ
> P would give a clock phase 1 + εΔ/P of probability in all (1.46 for a 12-hour clock and
12-day intervals), and on cho2000 with ages the prior's 12-hour clock took 15-23 % of the
weight on a web without clocks. Rows without ages score exactly as before.

Everything is vectorized numpy in log space, computed in chunks of rows whose matrices stay
under ``chunk_cells`` numbers, so memory is bounded whatever the number of URLs; the prior is
fit on at most ``max_fit_rows`` pages (an even sample beyond that: 48-odd weights do not need a
million pages). Pure functions: no I/O, no clock, no randomness.

The modules build on each other in this order, each only on the ones before it:
:mod:`.components` (the components, the class keys and the weight vectors over them),
:mod:`.histories` (the histories as the likelihoods read them), :mod:`.likelihood`,
:mod:`.fit` (EM), :mod:`.posterior` (what a page's posterior implies) and :mod:`.table`
(what the assets call: the ``change_prior`` table and the per-page rates and gains).
"""
