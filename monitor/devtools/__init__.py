"""Local and development tools: the local tansu broker, the synthetic traffic generator, and the demo that runs
the whole path on one machine. Nothing in the service runtime depends on them."""
