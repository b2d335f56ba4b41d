package membership

import (
	"context"
	"errors"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// Certificates: the agent renews and rotates the member's certificates and hands them to etcd.

// certKeeper keeps the member's certificate files current (Certs.Ensure) at most once per certLook, and
// keeps the outcome of the last look for the reports.
type certKeeper struct {
	*env
	// auth: every look reads the declared auth first, and after a good one points the agent's own
	// calls at the root identity.
	auth *authKeeper

	// The last look: what the files hold, or why they could not be made.
	facts   CertFacts
	err     string
	checked time.Time
	// ready: every plane's files have been usable once (etcd may start; later problems keep the files
	// in use and are only reported).
	ready bool
}

// askRenewal passes the renewal the hook asks for to Certs; a new one is looked at now, not at the next
// certLook.
func (c *certKeeper) askRenewal(mark string) {
	if c.certs == nil || c.certs.Renewal == mark {
		return
	}
	c.certs.Renewal = mark
	c.recheck()
}

// askRotation takes the CA rotation step and restart permission from the Lease; a change is looked at
// at once.
func (c *certKeeper) askRotation(in Intent) {
	if c.certs == nil || (c.certs.Rotation == in.CARotation && c.certs.Restart == in.CARestart) {
		return
	}
	c.certs.Rotation, c.certs.Restart = in.CARotation, in.CARestart
	c.recheck()
}

// refresh runs Certs.Ensure at most once per certLook (at once while it has never succeeded) and
// keeps the outcome for the reports.
func (c *certKeeper) refresh(ctx context.Context) error {
	if c.certs == nil {
		return nil
	}
	look := certLook
	if c.cfg.CertLook > 0 {
		look = c.cfg.CertLook
	}
	if c.certs.Rotation.Mark != "" || c.certs.Restart != "" {
		look = min(look, rotationLook) // each step of a rotation waits for every member's look
	}
	if c.err == "" && c.ready && time.Since(c.checked) < look {
		return nil
	}
	retry := c.tick() // etcd waits for its files: look again soon
	if c.ready {
		retry = look // etcd runs on the files it has: a bad Secret is looked at as often as a good one
	}
	if c.err != "" && time.Since(c.checked) < retry {
		return errors.New(c.err)
	}
	c.checked = time.Now()
	// Every agent knows the declared users: a CA rotation's drop step waits for their Secrets too.
	if c.auth.read(ctx) {
		c.recheck()
	}
	// Bounded: a hung Secret read must not hold up the supervision of etcd.
	ectx, cancel := context.WithTimeout(ctx, 15*time.Second)
	f, err := c.certs.Ensure(ectx)
	cancel()
	c.facts = f
	if err != nil {
		if err.Error() != c.err {
			// Posted when the problem appears or changes, not at every look.
			kept := "etcd keeps the files it has"
			if !c.ready {
				kept = "etcd waits for usable files"
			}
			c.event(EventCertificatesInvalid, "CheckCertificates", true, "%v (%s)", err, kept)
		}
		c.err = err.Error()
		c.log.Warn("certificates", "error", err)
		return err
	}
	c.err, c.ready = "", true
	c.auth.useRootIdentity()
	return nil
}

// recheck makes the next refresh look at once (a new renewal, rotation step or declaration; a start).
func (c *certKeeper) recheck() {
	c.checked = time.Time{}
}

// fill adds the last look to a report: the files' facts, and why they could not be made when nothing
// else is reported.
func (c *certKeeper) fill(r *api.Report) {
	c.facts.fill(r)
	if c.err != "" && r.Error == "" {
		r.SetError(api.ReasonCertificatesInvalid, c.err)
	}
}
