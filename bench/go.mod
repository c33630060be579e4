module github.com/ratewise/ratewise/bench

go 1.26.0

require (
	github.com/didip/tollbooth/v7 v7.0.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-chi/chi/v5 v5.5.0
	github.com/go-chi/httprate v0.16.1
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/ratewise/ratewise v0.1.0
	github.com/ratewise/ratewise/redis v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sethvargo/go-limiter v0.7.1
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
	golang.org/x/time v0.16.0
)

require (
	github.com/bits-and-blooms/bitset v1.29.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-pkgz/expirable-cache/v3 v3.0.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/jarcoal/httpmock v1.4.2 // indirect
	github.com/klauspost/cpuid/v2 v2.4.2 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.63.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
