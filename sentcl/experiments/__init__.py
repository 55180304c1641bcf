"""sentcl.experiments: the paper tables and figures as experiments (spec, parameters, catalog), how they run
(plan, execute, session, runner) and what they show (results, report, power, costs). Import from the modules."""
