module github.com/deadletter/deadletter/services/deadletter

go 1.26

require (
	github.com/deadletter/deadletter/schemas v0.0.0
	github.com/deadletter/deadletter/shared v0.0.0
)

replace (
	github.com/deadletter/deadletter/schemas => ../../schemas
	github.com/deadletter/deadletter/shared => ../../shared
)
