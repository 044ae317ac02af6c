"""Empirical privacy audit of the engine's mechanisms: ``python -m bench.audit``.

Each production mechanism of ``dp.engine`` (an online Gaussian answer, an online Laplace
answer, the Matrix Mechanism release, a whole epoch, user-level bounding with a
``dp.units.Contribution``) is run many times, through the engine's own code and samplers, on a
pair of neighbouring datasets ``D, D'``. From the runs, :mod:`bench.audit.stats` computes a lower
bound on the epsilon the mechanism actually has, with Clopper–Pearson confidence intervals
(the approach of DP-Auditorium and of the stochastic testers of Google's DP library): for a
test event ``S``, ``eps_lb = log((p_lo(D) - delta) / p_hi(D'))``, maximised over the events
and both orders on separate selection trials. A correct mechanism's bound is below the epsilon
it claims (its charges, converted by ``dp.calibration``); a control -- the online Gaussian
answer with its noise halved by a sampler wrapper -- must come out above its claim, which shows
the audit can catch a broken mechanism.

The bound is a *lower* bound: for Gaussian noise audited at a small delta it is loose (the
claim is decided by tails of probability ~delta that no feasible number of trials sees), for
Laplace noise nearly tight. The cases are in :mod:`bench.audit.cases`; the runner, the table and
``--write-docs`` (the block between ``<!-- audit:begin -->`` and ``<!-- audit:end -->`` in
docs/benchmarks.md) in :mod:`bench.audit.run`.
"""
