package plugin

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// requestOpts are the options of a command that sets a request annotation on the EtcdCluster and, with
// --wait, follows its status until the request is served (backup, defrag, renew, rotate-ca, recover,
// rotate-user).
type requestOpts struct {
	name    string
	token   string
	wait    bool
	timeout time.Duration
	kube    KubeFlags
	// asked is when the request was made (the default token).
	asked time.Time
}

// requestFlags is what such commands' flags differ in: the help of --id and --wait, --timeout's
// default, and whether the default token counts nanoseconds rather than seconds.
type requestFlags struct {
	idHelp, waitHelp string
	timeout          time.Duration
	nanos            bool
}

// startRequest reads NAME, --id, --wait and --timeout, connects, and reads the EtcdCluster (which must
// exist). Without --id the token is the time of the request.
func startRequest(ctx context.Context, cmd string, env Env, args []string, f requestFlags) (*requestOpts, *Clients, *unstructured.Unstructured, error) {
	o, fs := requestFlagSet(cmd, env, f)
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, parseErr(err)
	}
	var err error
	if o.name, err = oneName(cmd, fs.Args()); err != nil {
		return nil, nil, nil, err
	}
	o.defaultToken(env, f.nanos)
	c, u, err := o.cluster(ctx, env)
	if err != nil {
		return nil, nil, nil, err
	}
	return o, c, u, nil
}

// requestFlagSet is a request command's flags: kubectl's, --id, --wait and --timeout; the command adds
// its own before it parses them.
func requestFlagSet(cmd string, env Env, f requestFlags) (*requestOpts, *pflag.FlagSet) {
	o := &requestOpts{}
	fs := newFlags(cmd, env, &o.kube)
	fs.StringVar(&o.token, "id", "", f.idHelp)
	fs.BoolVarP(&o.wait, "wait", "w", true, f.waitHelp)
	fs.DurationVar(&o.timeout, "timeout", f.timeout, "how long --wait waits")
	return o, fs
}

// defaultToken stamps the request with the time and, without --id, makes that time (in seconds, or
// nanoseconds) the token.
func (o *requestOpts) defaultToken(env Env, nanos bool) {
	o.asked = env.Now()
	if o.token == "" {
		o.token = strconv.FormatInt(o.asked.Unix(), 10)
		if nanos {
			o.token = strconv.FormatInt(o.asked.UnixNano(), 10)
		}
	}
}

// cluster connects and reads the EtcdCluster NAME, which must exist.
func (o *requestOpts) cluster(ctx context.Context, env Env) (*Clients, *unstructured.Unstructured, error) {
	c, err := env.Connect(&o.kube)
	if err != nil {
		return nil, nil, err
	}
	u, err := getCluster(ctx, c, o.name)
	if err != nil {
		return nil, nil, err
	}
	return c, u, nil
}

// ask sets the request's annotation to the token and says so: asked is a format of the token, the
// namespace and the name.
func (o *requestOpts) ask(ctx context.Context, env Env, c *Clients, annotation, asked string) error {
	if err := annotate(ctx, c, o.name, annotation, &o.token); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, asked+"\n", o.token, c.Namespace, o.name)
	return nil
}

// follow reads the EtcdCluster every PollInterval and hands its status to served until served says the
// request is over (with its error, nil when it succeeded). A read that fails is tried again at the next
// poll; a status that cannot be decoded ends the wait. Ctrl-C ends it with exit status 130, --timeout
// with timedOut's error.
func (o *requestOpts) follow(ctx context.Context, env Env, c *Clients, served func(*Snapshot) (bool, error), timedOut func() error) error {
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for {
		if u, err := getCluster(wctx, c, o.name); err == nil {
			snap, err := snapshotOf(u)
			if err != nil {
				return err
			}
			if over, err := served(snap); over {
				return err
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return &ExitError{Code: 130, Err: ctx.Err()}
			}
			return timedOut()
		case <-time.After(env.PollInterval):
		}
	}
}
