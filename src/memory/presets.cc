#include "strata/memory/presets.h"

namespace strata::memory {

const std::vector<PresetDirectory>& PresetDirectories(std::string_view kind) {
  static const std::vector<PresetDirectory> kUser = {
      {"", "A user's space: what the agent has learned about this person.",
       "Long-term memories about one user, kept across sessions: who they are, what they prefer, the people, "
       "projects and things they mention, and what happened. Read the abstracts of `memories/*` to decide "
       "where to look."},
      {"memories", "Memories about the user, by category.",
       "profile: stable facts about the user; preferences: how they like things done; entities: people, "
       "projects, tools and places they mention; events: what happened and when."},
      {"memories/profile", "Stable facts about the user (role, background, skills, language).",
       "One evolving record per fact: name, role, organisation, expertise, languages, time zone. Merged, not "
       "appended, when the facts change."},
      {"memories/preferences", "How the user likes things done.",
       "Style, tools, formats and working habits the user asked for or corrected, one record per topic "
       "(e.g. coding style, answer length). Merged when the preference evolves."},
      {"memories/entities", "People, projects, tools and places the user mentions.",
       "One record per entity with what the agent knows about it and how it relates to the user."},
      {"memories/events", "Things that happened, with dates.",
       "Appended: decisions, milestones, incidents and commitments, each with when it happened."},
  };
  static const std::vector<PresetDirectory> kAgent = {
      {"", "An agent's space: its own experience, skills and instructions.",
       "What this agent has learned by doing (memories), what it can do (skills) and how it has been told to "
       "behave (instructions)."},
      {"memories", "The agent's own experience, by category.",
       "cases: problems it solved and how; patterns: what tends to work, distilled from cases."},
      {"memories/cases", "Problems the agent worked on and how they ended.",
       "Appended: one record per case with the problem, the approach, the outcome and what to reuse."},
      {"memories/patterns", "Lessons distilled from many cases.",
       "Merged: one evolving record per pattern (when it applies, what to do, what to avoid)."},
      {"skills", "Skills the agent can use (SKILL.md).",
       "Each skill is a leaf with a name, a description (its abstract) and instructions (its content)."},
      {"instructions", "Standing instructions for the agent.",
       "Rules and guidance given by the user or the operator that apply to every session."},
  };
  static const std::vector<PresetDirectory> kResources = {
      {"", "Shared resources: documents, references and data any agent may consult.",
       "Reference material imported or written by people and agents: documentation, notes, code and data. "
       "Organised in directories whose abstracts say what they hold."},
  };
  static const std::vector<PresetDirectory> kSession = {
      {"", "A session: its messages, archives and what was learned from it.",
       "The live conversation of one session, its committed archives (history/archive_NNN) and the links to "
       "the contexts and memories it used or produced."},
  };
  static const std::vector<PresetDirectory> kNone;
  if (kind == "user") return kUser;
  if (kind == "agent") return kAgent;
  if (kind == "resources") return kResources;
  if (kind == "session") return kSession;
  return kNone;
}

}  // namespace strata::memory
