// Package tooltest has the conformance suite every Polyweave tool runs
// ([Run]) and a scripted model adapter for tests of tool stages
// ([ScriptedModel]).
package tooltest
