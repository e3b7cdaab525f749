#pragma once

#include "scout/v1/arena.pb.h"

/// The example bot's whole logic: given a DecisionRequest, return the Action to play.
/// Replace its body (bot/strategy.cpp) with your own.
scout::v1::Action choose_action(const scout::v1::DecisionRequest& request);
