"""The Hamilton node modules of ctxengine, one per stage (see docs/CONTRIBUTING-NODES.md)."""
