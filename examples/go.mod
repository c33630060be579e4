module github.com/ratewise/ratewise/examples

go 1.25.0

require github.com/ratewise/ratewise v0.0.0-00010101000000-000000000000

require github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect

// The examples follow the library in this repository, not a release.
replace github.com/ratewise/ratewise => ../
