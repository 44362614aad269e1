"""The stores: one module per entity (tasks, executions, the dead-letter queue, DAGs and
their runs) that reads and writes it through named queries. The faces (CLI, web pages,
REST API, the Python API) call these; the pure rules they apply live outside, in
:mod:`pgsched.taskspec`, :mod:`pgsched.schedule`, :mod:`pgsched.dag` and
:mod:`pgsched.lifecycle`."""
