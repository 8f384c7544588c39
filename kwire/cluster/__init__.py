"""Cluster mode: ZooKeeper, the controller, replication on both sides and the ZooKeeper ACL and SCRAM stores."""
