module github.com/deadletter/deadletter/schemas

go 1.26
