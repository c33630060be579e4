module github.com/ratewise/ratewise

go 1.26.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/jarcoal/httpmock v1.4.2
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.16.0
)

require github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
