"""TLS, SASL (server and inter-broker client) and SCRAM, what a connection knows of its listener and principal, and the single-node ACL and SCRAM stores."""
