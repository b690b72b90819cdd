"""`switch demo`: a real proxy in front of a simulated Kimi-style upstream, a scripted workload, its bill.

`upstream` is the simulated model API (an ASGI app on 127.0.0.1), `workload` the scripted harness calls,
`run` puts them together under a throwaway `SWITCH_HOME`. Nothing here leaves the machine.
"""
