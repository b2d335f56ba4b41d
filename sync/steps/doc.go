// Package steps holds the decision's values: what one sync decided (Decision), as status reports it,
// and the waits it gives (Wait); and the step families moved out of package sync so far, each a pure
// function of the facts and a small typed input of the decisions before it, returning its part of the
// decision as a value: Auth, Space (and SpaceMessage), Paused, Defrag (and DefragPass, Defragmenting),
// Recovery, RotateCA (and RestartTurn, the turn of a restart in place), Roll (and RollNext, the roll's
// order). Package sync calls them in its order (decide.go) and copies their results into the plan;
// package render renders the values (render.Status), so neither reaches into the other: below it steps
// imports only facts (and api, internal/pki).
package steps
