package membership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// etcd's users and roles, reconciled (docs/design/20-auth.md): the agent of the leader reads what etcd
// holds (ReadAuth), compares it with what spec.auth declares (PlanAuth, pure) and applies the
// difference in the order etcd requires (ApplyAuth). A hand edit made with etcdctl is a difference
// like any other: it is put back and reported.

// Perm is one permission as etcd stores it: a key, a range end ("" for the key alone) and a type.
type Perm struct {
	Key, End string
	Type     clientv3.PermissionType
}

// The permission types as clientv3 spells them in its calls.
var (
	permRead      = clientv3.PermissionType(clientv3.PermRead)
	permWrite     = clientv3.PermissionType(clientv3.PermWrite)
	permReadWrite = clientv3.PermissionType(clientv3.PermReadWrite)
)

func (p Perm) String() string {
	kind := map[clientv3.PermissionType]string{permRead: api.AccessRead, permWrite: api.AccessWrite, permReadWrite: api.AccessReadWrite}[p.Type]
	switch {
	case p.End == "":
		return fmt.Sprintf("%s on key %q", kind, p.Key)
	case p.Key == "\x00" && p.End == "\x00":
		return kind + " on every key"
	case p.End == api.PrefixEnd(p.Key):
		return fmt.Sprintf("%s on prefix %q", kind, p.Key)
	default:
		return fmt.Sprintf("%s on [%q, %q)", kind, p.Key, p.End)
	}
}

// PermOf is a declared permission as etcd stores it. Every key is etcd's [\x00, \x00): etcd refuses an
// empty key.
func PermOf(p api.AuthPermission) Perm {
	t := map[string]clientv3.PermissionType{api.AccessRead: permRead, api.AccessWrite: permWrite, api.AccessReadWrite: permReadWrite}[p.Access]
	if p.Prefix && p.Key == "" {
		return Perm{Key: "\x00", End: "\x00", Type: t}
	}
	return Perm{Key: p.Key, End: p.RangeEnd(), Type: t}
}

// AuthState is etcd's authentication as read: whether it is on, its revision, each role's permissions
// and each user's roles.
type AuthState struct {
	Enabled  bool
	Revision uint64
	Roles    map[string][]Perm
	Users    map[string][]string
	// PasswordOK: the users whose password is known to be the one their Secret holds (etcd never shows
	// a password: checked by a login, or remembered from the last set; CheckPasswords). NoPassword: the
	// users a login found made without a password, which no password change gives one.
	PasswordOK map[string]bool
	NoPassword map[string]bool
}

// ReadAuth reads etcd's users and roles. It needs the root identity once auth is on.
func ReadAuth(ctx context.Context, cl *clientv3.Client) (AuthState, error) {
	st := AuthState{Roles: map[string][]Perm{}, Users: map[string][]string{}}
	s, err := cl.AuthStatus(ctx)
	if err != nil {
		return st, fmt.Errorf("auth status: %w", err)
	}
	st.Enabled, st.Revision = s.Enabled, s.AuthRevision
	roles, err := cl.RoleList(ctx)
	if err != nil {
		return st, fmt.Errorf("role list: %w", err)
	}
	for _, r := range roles.Roles {
		g, err := cl.RoleGet(ctx, r)
		if err != nil {
			return st, fmt.Errorf("role %s: %w", r, err)
		}
		ps := []Perm{}
		for _, p := range g.Perm {
			ps = append(ps, Perm{Key: string(p.Key), End: string(p.RangeEnd), Type: clientv3.PermissionType(p.PermType)})
		}
		st.Roles[r] = ps
	}
	users, err := cl.UserList(ctx)
	if err != nil {
		return st, fmt.Errorf("user list: %w", err)
	}
	for _, u := range users.Users {
		g, err := cl.UserGet(ctx, u)
		if err != nil {
			return st, fmt.Errorf("user %s: %w", u, err)
		}
		st.Users[u] = slices.Clone(g.Roles)
	}
	return st, nil
}

// AuthOp is the kind of one change to etcd's auth.
type AuthOp string

const (
	OpAddRole     AuthOp = "add role"
	OpGrantPerm   AuthOp = "grant"
	OpRevokePerm  AuthOp = "revoke"
	OpDeleteRole  AuthOp = "delete role"
	OpAddUser     AuthOp = "add user"
	OpGrantRole   AuthOp = "grant role"
	OpRevokeRole  AuthOp = "revoke role"
	OpDeleteUser  AuthOp = "delete user"
	OpSetPassword AuthOp = "set password"
	// OpRemakeUser deletes a user and adds it again with its password and roles: the only way to give a
	// password to a user made without one (etcd keeps that option through a password change), and
	// what sets a password while auth is off, when no login can tell whether the user has one.
	OpRemakeUser  AuthOp = "remake user"
	OpEnableAuth  AuthOp = "enable auth"
	OpDisableAuth AuthOp = "disable auth"
)

// AuthStep is one change, in the order ApplyAuth makes them.
type AuthStep struct {
	Op   AuthOp
	User string
	Role string
	Perm Perm
	// Password: the user's (add user, set password, remake user); never printed.
	Password string
	// Roles: the roles a remade user is granted again.
	Roles []string
}

func (s AuthStep) String() string {
	switch s.Op {
	case OpAddRole, OpDeleteRole:
		return fmt.Sprintf("%s %s", s.Op, s.Role)
	case OpGrantPerm:
		return fmt.Sprintf("grant role %s %s", s.Role, s.Perm)
	case OpRevokePerm:
		return fmt.Sprintf("revoke from role %s %s", s.Role, s.Perm)
	case OpAddUser, OpDeleteUser:
		return fmt.Sprintf("%s %s", s.Op, s.User)
	case OpSetPassword, OpRemakeUser:
		return fmt.Sprintf("set the password of user %s", s.User)
	case OpGrantRole:
		return fmt.Sprintf("grant user %s role %s", s.User, s.Role)
	case OpRevokeRole:
		return fmt.Sprintf("revoke from user %s role %s", s.User, s.Role)
	default:
		return string(s.Op)
	}
}

// PlanAuth is the list of changes that make have into want, in the order etcd requires: the root role
// and user first (auth cannot be enabled without them), then roles and their permissions, then users
// and their roles, then what is no longer declared, and the switch last. The root user and role are
// never removed; a root role granted by hand to a declared user is revoked like any role not declared.
// passwords are the logins the identity Secrets hold (root's, and the users' login slots,
// api.LoginSlot): a login is added with its password, one whose password is not known right
// (AuthState.PasswordOK) gets it set, and a slot no longer named is deleted like any user not declared.
func PlanAuth(want *api.AuthConfig, have AuthState, passwords map[string]string) []AuthStep {
	if want == nil {
		return nil
	}
	var steps []AuthStep
	// user makes a login (root, a slot) exist with its password and roles. It is added once its Secret
	// holds a password (not before: etcd keeps a user made without one so, through any password
	// change); a password a login found wrong is set; a user that may have none, or whose password
	// cannot be checked (auth off), is made again with it and its roles. With certificate logins and
	// auth on, a root made without a password (before passwords existed) is left as it is: making it
	// again would refuse the agents' calls for a moment, and its certificate does not need one. It
	// returns the roles etcd will hold before the grants, and false when the user is not there.
	user := func(name string, roles []string) ([]string, bool) {
		pw := passwords[name]
		held, exists := have.Users[name]
		switch {
		case pw == "" || exists && have.PasswordOK[name]:
			return held, exists
		case !exists:
			steps = append(steps, AuthStep{Op: OpAddUser, User: name, Password: pw})
			return nil, true
		case have.Enabled && have.NoPassword[name] && !want.Passwords:
			return held, true
		case have.Enabled && !have.NoPassword[name]:
			steps = append(steps, AuthStep{Op: OpSetPassword, User: name, Password: pw})
			return held, true
		default:
			steps = append(steps, AuthStep{Op: OpRemakeUser, User: name, Password: pw, Roles: roles})
			return roles, true
		}
	}
	if _, ok := have.Roles[api.RootRole]; !ok {
		steps = append(steps, AuthStep{Op: OpAddRole, Role: api.RootRole})
	}
	roles, rootThere := user(api.RootUser, []string{api.RootRole})
	if rootThere && !slices.Contains(roles, api.RootRole) {
		steps = append(steps, AuthStep{Op: OpGrantRole, User: api.RootUser, Role: api.RootRole})
	}
	declaredRoles := map[string]bool{api.RootRole: true}
	for _, r := range want.Roles {
		declaredRoles[r.Name] = true
		held, ok := have.Roles[r.Name]
		if !ok {
			steps = append(steps, AuthStep{Op: OpAddRole, Role: r.Name})
		}
		wanted := map[[2]string]bool{}
		for _, p := range r.Permissions {
			ep := PermOf(p)
			wanted[[2]string{ep.Key, ep.End}] = true
			if !slices.Contains(held, ep) {
				// Granting a range again with another type replaces it.
				steps = append(steps, AuthStep{Op: OpGrantPerm, Role: r.Name, Perm: ep})
			}
		}
		for _, p := range held {
			if !wanted[[2]string{p.Key, p.End}] {
				steps = append(steps, AuthStep{Op: OpRevokePerm, Role: r.Name, Perm: p})
			}
		}
	}
	// The declared users (their certificates' CN, without a password) and their login slots that
	// passwords name (each with its owner's roles).
	type declared struct {
		name  string
		roles []string
		login bool
	}
	var users []declared
	rolesOf := map[string][]string{}
	for _, u := range want.Users {
		users = append(users, declared{u.Name, u.Roles, false})
		rolesOf[u.Name] = u.Roles
	}
	for _, name := range sortedKeysOf(passwords) {
		if owner, ok := api.SlotOwner(name); ok && rolesOf[owner] != nil {
			users = append(users, declared{name, rolesOf[owner], true})
		}
	}
	declaredUsers := map[string]bool{api.RootUser: true}
	for _, u := range users {
		declaredUsers[u.name] = true
		held, ok := have.Users[u.name]
		switch {
		case u.login:
			if held, ok = user(u.name, u.roles); !ok {
				continue
			}
		case !ok:
			// A certificate's user: no password (etcd then refuses a password login as it).
			steps = append(steps, AuthStep{Op: OpAddUser, User: u.name})
			held = nil
		}
		for _, r := range u.roles {
			if !slices.Contains(held, r) {
				steps = append(steps, AuthStep{Op: OpGrantRole, User: u.name, Role: r})
			}
		}
		for _, r := range held {
			if !slices.Contains(u.roles, r) {
				steps = append(steps, AuthStep{Op: OpRevokeRole, User: u.name, Role: r})
			}
		}
	}
	for _, u := range sortedKeysOf(have.Users) {
		if !declaredUsers[u] {
			steps = append(steps, AuthStep{Op: OpDeleteUser, User: u})
		}
	}
	for _, r := range sortedKeysOf(have.Roles) {
		if !declaredRoles[r] {
			steps = append(steps, AuthStep{Op: OpDeleteRole, Role: r})
		}
	}
	switch {
	case want.Enabled && !have.Enabled && rootThere:
		// etcd refuses auth enable without a root user: it waits for root's Secret.
		steps = append(steps, AuthStep{Op: OpEnableAuth})
	case !want.Enabled && have.Enabled:
		steps = append(steps, AuthStep{Op: OpDisableAuth})
	}
	return steps
}

// sortedKeysOf is a map's keys in order: plans and reports come out the same at every reconcile.
func sortedKeysOf[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// CheckPasswords fills have.PasswordOK for the users etcd holds whose password is known: with auth on,
// by logging in (etcd compares against its bcrypt hash: tens of milliseconds a user); with auth off no
// login is possible, so a password counts as right only when this agent set it (set: user to the
// password it last set) and etcd's auth did not change since (unchanged).
func CheckPasswords(ctx context.Context, cl *clientv3.Client, have *AuthState, passwords, set map[string]string, unchanged bool) error {
	have.PasswordOK = map[string]bool{}
	for _, u := range sortedKeysOf(passwords) {
		if _, ok := have.Users[u]; !ok {
			continue
		}
		if !have.Enabled {
			have.PasswordOK[u] = unchanged && set[u] == passwords[u]
			continue
		}
		_, err := cl.Authenticate(ctx, u, passwords[u])
		switch {
		case err == nil:
			have.PasswordOK[u] = true
		case errors.Is(rpctypes.Error(err), rpctypes.ErrAuthFailed):
		case err != nil && strings.Contains(err.Error(), "no password user"):
			// etcd's auth.ErrNoPasswordUser, which reaches clients as code Unknown.
			if have.NoPassword == nil {
				have.NoPassword = map[string]bool{}
			}
			have.NoPassword[u] = true
		default:
			return fmt.Errorf("checking the password of user %s: %w", u, err)
		}
	}
	return nil
}

// remakeUser deletes the user and adds it again with its password and roles.
func remakeUser(ctx context.Context, cl *clientv3.Client, s AuthStep) error {
	if _, err := cl.UserDelete(ctx, s.User); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
		return err
	}
	if _, err := cl.UserAdd(ctx, s.User, s.Password); err != nil {
		return err
	}
	for _, r := range s.Roles {
		if _, err := cl.UserGrantRole(ctx, s.User, r); err != nil {
			return err
		}
	}
	return nil
}

// alreadyDone is, for each step another agent or a hand edit may have made before it, the error etcd
// answers the step with then: the step counts as made.
var alreadyDone = map[AuthOp]error{
	OpAddRole:    rpctypes.ErrRoleAlreadyExist,
	OpRevokePerm: rpctypes.ErrPermissionNotGranted,
	OpDeleteRole: rpctypes.ErrRoleNotFound,
	OpAddUser:    rpctypes.ErrUserAlreadyExist,
	OpRevokeRole: rpctypes.ErrRoleNotGranted,
	OpDeleteUser: rpctypes.ErrUserNotFound,
}

// ApplyAuth makes the steps in order and stops at the first that fails: the next reconcile reads
// etcd again and plans from there. A step that finds its work done (another agent's, or a hand edit
// racing it) counts as made.
func ApplyAuth(ctx context.Context, cl *clientv3.Client, steps []AuthStep, done func(AuthStep)) error {
	for _, s := range steps {
		err := applyAuthStep(ctx, cl, s)
		if was, ok := alreadyDone[s.Op]; ok && errors.Is(err, was) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		if done != nil {
			done(s)
		}
	}
	return nil
}

// applyAuthStep is one step's call to etcd.
func applyAuthStep(ctx context.Context, cl *clientv3.Client, s AuthStep) error {
	var err error
	switch s.Op {
	case OpAddRole:
		_, err = cl.RoleAdd(ctx, s.Role)
	case OpGrantPerm:
		_, err = cl.RoleGrantPermission(ctx, s.Role, s.Perm.Key, s.Perm.End, s.Perm.Type)
	case OpRevokePerm:
		_, err = cl.RoleRevokePermission(ctx, s.Role, s.Perm.Key, s.Perm.End)
	case OpDeleteRole:
		_, err = cl.RoleDelete(ctx, s.Role)
	case OpAddUser:
		// A user whose Secret holds no password yet gets none: etcd then refuses a password login.
		_, err = cl.UserAddWithOptions(ctx, s.User, s.Password, &clientv3.UserAddOptions{NoPassword: s.Password == ""})
	case OpSetPassword:
		_, err = cl.UserChangePassword(ctx, s.User, s.Password)
	case OpRemakeUser:
		err = remakeUser(ctx, cl, s)
	case OpGrantRole:
		_, err = cl.UserGrantRole(ctx, s.User, s.Role)
	case OpRevokeRole:
		_, err = cl.UserRevokeRole(ctx, s.User, s.Role)
	case OpDeleteUser:
		_, err = cl.UserDelete(ctx, s.User)
	case OpEnableAuth:
		_, err = cl.AuthEnable(ctx)
	case OpDisableAuth:
		_, err = cl.AuthDisable(ctx)
	default:
		err = errors.New("unknown step")
	}
	return err
}
