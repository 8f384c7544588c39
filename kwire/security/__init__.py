"""TLS, SASL, SCRAM, the principal of a connection and the single-node ACL and SCRAM stores."""
