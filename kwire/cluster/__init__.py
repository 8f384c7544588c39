"""Cluster mode: the ZooKeeper session, this broker as a cluster member (and controller when elected), replication on both sides, and the ACL and SCRAM stores in ZooKeeper."""
