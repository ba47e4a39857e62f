"""Test, demo and benchmark infrastructure: real vLLM wheels, loopback hosts, synthetic
installs. Nothing in fleetcheck's own checking path imports it."""
