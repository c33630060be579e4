// Package composite runs one required call, then several others in
// parallel, all under one wait budget, and reports what each branch did:
// whether it completed, its attempts, its waits and its error. It is the
// shape of an API read that needs a primary object and its parts (a card,
// then its comments and subtasks) and is still useful when a part fails.
//
// Branches reach the ratewise transport through the context they are
// given: it carries the shared budget ([ratewise.WithBudget]), the branch's
// own [ratewise.CallStats] and its name as the endpoint label
// ([ratewise.WithEndpoint]).
package composite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ratewise/ratewise"
)

// Branch is one call of a fan-out. Call must use the context it is given
// for its requests, so that they share the budget and count in the
// branch's stats, and must return soon after the context ends. It keeps its
// result itself, typically in a variable of the caller's.
type Branch struct {
	Name string
	Call func(ctx context.Context) error
}

// Options configure Run. The zero value shares no budget beyond what the
// calls' retry policies allow, and tolerates failed secondaries.
type Options struct {
	// Budget is the wait budget every branch shares (see
	// [ratewise.WithBudget]); zero means none is set here.
	Budget time.Duration
	// FailOnPartial makes any failed secondary fail the whole run.
	FailOnPartial bool
}

// Outcome is what one branch did.
type Outcome struct {
	Name          string
	Completed     bool
	Attempts      int
	Waited        time.Duration
	RateLimitHits int
	// LastStatus is the status of the branch's last response, 0 if none.
	LastStatus int
	// Err is the error the branch returned. Its text has the secrets a
	// request error may quote removed (see [ratewise.Redact]): an
	// *url.Error from http.Client quotes the URL, query and all. The
	// error itself is still there for errors.Is and errors.As.
	Err error
}

// MarshalJSON writes the outcome with Err as its (redacted) text, which
// is what a reader of an envelope can use.
func (o Outcome) MarshalJSON() ([]byte, error) {
	type plain Outcome // without this method
	var text string
	if o.Err != nil {
		text = o.Err.Error()
	}
	return json.Marshal(struct {
		plain
		Err string `json:",omitempty"`
	}{plain(o), text})
}

// redactedError is a branch's error whose text leaves out secrets.
type redactedError struct{ err error }

func (e *redactedError) Error() string { return ratewise.Redact(e.err.Error(), nil) }
func (e *redactedError) Unwrap() error { return e.err }

// redact wraps err so that its text leaves out secrets; nil stays nil.
func redact(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{err: err}
}

// Result reports every branch that ran: the primary first, then the
// secondaries in the order given.
type Result struct {
	Branches []Outcome
	// BudgetSpent is the time during which at least one branch waited, as
	// the shared budget counted it; zero without Options.Budget.
	BudgetSpent time.Duration
}

// Outcome returns the named branch's outcome.
func (r Result) Outcome(name string) (Outcome, bool) {
	for _, o := range r.Branches {
		if o.Name == name {
			return o, true
		}
	}
	return Outcome{}, false
}

// Waited returns the time each branch spent waiting, summed: waits of
// branches side by side count twice, unlike in BudgetSpent.
func (r Result) Waited() time.Duration {
	var d time.Duration
	for _, o := range r.Branches {
		d += o.Waited
	}
	return d
}

// RateLimitHits returns the rate-limited responses of all branches.
func (r Result) RateLimitHits() int {
	n := 0
	for _, o := range r.Branches {
		n += o.RateLimitHits
	}
	return n
}

// Failed returns the outcomes of the branches that did not complete.
func (r Result) Failed() []Outcome {
	var failed []Outcome
	for _, o := range r.Branches {
		if !o.Completed {
			failed = append(failed, o)
		}
	}
	return failed
}

// BranchError reports the failure of a branch that fails the whole run:
// the primary, or with FailOnPartial, secondaries.
type BranchError struct {
	Failed []Outcome
}

// Error names each failed branch and its error.
func (e *BranchError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, o := range e.Failed {
		parts[i] = fmt.Sprintf("%s: %v", o.Name, o.Err)
	}
	return "composite: " + strings.Join(parts, "; ")
}

// Unwrap returns the failed branches' errors, for errors.Is and errors.As.
func (e *BranchError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, o := range e.Failed {
		errs[i] = o.Err
	}
	return errs
}

// Run calls primary, then, if it completed, every secondary in parallel.
// Branch names must differ; Run checks that before calling any.
// It returns once every branch has returned: no goroutine outlives it. A
// failed primary is a *BranchError, and the secondaries do not run; a
// failed secondary is reported in the Result, and is a *BranchError too
// with FailOnPartial. Cancelling ctx ends the branches' waits, and Run
// returns what had completed by then.
func Run(ctx context.Context, primary Branch, secondaries []Branch, opts Options) (Result, error) {
	seen := map[string]bool{primary.Name: true}
	for _, b := range secondaries {
		if seen[b.Name] {
			return Result{}, fmt.Errorf("composite: two branches are named %q: outcomes are told apart by name", b.Name)
		}
		seen[b.Name] = true
	}
	if opts.Budget > 0 {
		ctx = ratewise.WithBudget(ctx, opts.Budget)
	}
	res := Result{Branches: make([]Outcome, 1, 1+len(secondaries))}
	first := run(ctx, primary)
	res.Branches[0] = first
	if !first.Completed {
		res.BudgetSpent = spent(ctx, opts.Budget)
		return res, &BranchError{Failed: []Outcome{first}}
	}

	outcomes := make(chan indexed, len(secondaries)) // buffered: no sender ever blocks
	for i, b := range secondaries {
		go func() { outcomes <- indexed{i, run(ctx, b)} }()
	}
	res.Branches = res.Branches[:1+len(secondaries)]
	for range secondaries {
		o := <-outcomes
		res.Branches[1+o.i] = o.Outcome
	}
	res.BudgetSpent = spent(ctx, opts.Budget)
	if failed := res.Failed(); opts.FailOnPartial && len(failed) > 0 {
		return res, &BranchError{Failed: failed}
	}
	return res, nil
}

type indexed struct {
	i int
	Outcome
}

// spent is what the run's budget of total has been charged.
func spent(ctx context.Context, total time.Duration) time.Duration {
	if left, ok := ratewise.BudgetLeft(ctx); ok && total > 0 {
		return total - left
	}
	return 0
}

// run calls one branch with its own stats and label.
func run(ctx context.Context, b Branch) Outcome {
	ctx, stats := ratewise.WithCallStats(ratewise.WithEndpoint(ctx, b.Name))
	err := ErrNoCall
	if b.Call != nil {
		err = b.Call(ctx)
	}
	return Outcome{
		Name:          b.Name,
		Completed:     err == nil,
		Attempts:      stats.Attempts(),
		Waited:        stats.Waited(),
		RateLimitHits: stats.RateLimitHits(),
		LastStatus:    stats.LastStatus(),
		Err:           redact(err),
	}
}

// ErrNoCall reports a branch without a Call function.
var ErrNoCall = errors.New("composite: branch has no Call")
