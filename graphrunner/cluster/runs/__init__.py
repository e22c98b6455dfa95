"""What producers and workers share: the `Cluster` connection, run ids, graphs, whole-run operations."""
