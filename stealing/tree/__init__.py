"""What runs where and who gets which tasks, decided without MPI: the topology files
(clusters, hosts, slots), the placement of routers and leaves on them (the thesis'
Algorithm 5.3.2 and ``tasks_per_branch``), task identities, and the steal policy each
router and the root follow (pools, grants, local then remote steals, splits). Plain
Python, unit-tested alone; everything below it in ``stealing`` carries these decisions
out."""
