package ratewise

// This file keeps the names an earlier version used, each an alias of
// the name that replaced it (docs/migrating.md).

// CooldownPolicy is the former name of PausePolicy.
//
// Deprecated: use [PausePolicy]. "Cooldown" is the breaker's open time.
type CooldownPolicy = PausePolicy

// WithCooldown is the former name of WithPause.
//
// Deprecated: use [WithPause].
func WithCooldown(p PausePolicy) Option { return WithPause(p) }

// Former names of DefaultPauseSpread, DefaultMaxPause and WaitPause.
//
// Deprecated: use [DefaultPauseSpread], [DefaultMaxPause] and [WaitPause].
const (
	DefaultCooldownSpread   = DefaultPauseSpread
	DefaultCooldownMaxPause = DefaultMaxPause
	WaitCooldown            = WaitPause
)

// LimitError is the former name of ClientLimitError.
//
// Deprecated: use [ClientLimitError]; [RateLimitError] is the server's.
type LimitError = ClientLimitError

// LimitStatus is the former name of KeyStatus.
//
// Deprecated: use [KeyStatus]; it holds the breaker and pause too.
type LimitStatus = KeyStatus

// LimitStatus is the former name of KeyStatus.
//
// Deprecated: use [Transport.KeyStatus].
func (t *Transport) LimitStatus(key string) KeyStatus { return t.KeyStatus(key) }
