//! A generic parallel blackboard: typed entries, knowledge sources, levels, workers.
