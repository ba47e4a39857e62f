"""The remote side of fleetcheck: modules sent to each host (as source, on stdin) and run
under the host's Python 3.8+. They import only the standard library and each other, so
they can run where fleetcheck is not installed."""

MODULES = ("jsonlite", "limits", "trust", "files", "install", "yaml_subset", "config_file_args", "context",
           "servers", "server_config", "lexer", "source", "patterns",
           "codebase", "conditions", "trace", "trace.values", "trace.nodes", "trace.state",
           "trace.question", "trace.predicates", "trace.paths", "trace.statements", "trace.expressions",
           "trace.calls", "trace.flow", "trace.key_offset", "trace.value_source", "decision", "signatures", "config_conversion", "config_keys", "server_log",
           "child", "drafter_build", "config_loader", "executor_script", "executor_findings", "executor",
           "drafter_script", "drafter_run",
           "integrity", "patch_presence", "shared_bytes", "smoke_load", "main")
