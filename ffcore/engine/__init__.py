"""Background scanners: partition-sharded, bounded per tick, one loop per scanner."""
