#include "collectives/core/engine.h"

namespace braid::collectives {

std::string_view engine_op_name(EngineOp op) {
  switch (op) {
    case EngineOp::SUM: return "SUM";
    case EngineOp::PRODUCT: return "PRODUCT";
    case EngineOp::MIN: return "MIN";
    case EngineOp::MAX: return "MAX";
    case EngineOp::BAND: return "BAND";
    case EngineOp::BOR: return "BOR";
    case EngineOp::BXOR: return "BXOR";
  }
  return "?";
}

}  // namespace braid::collectives
