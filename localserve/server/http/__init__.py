"""The HTTP edge every face shares: who may call (guard), how much (limits), the one error
mapping, the request's id, log line and metrics, and the readers of a request's body."""
