module github.com/deadletter/deadletter/shared

go 1.26

require (
	github.com/deadletter/deadletter/schemas v0.0.0
	github.com/santhosh-tekuri/jsonschema/v5 v5.3.1
)

replace github.com/deadletter/deadletter/schemas => ../schemas
