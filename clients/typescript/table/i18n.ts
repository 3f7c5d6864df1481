/** The web table's words, in Chinese and English. */

export type Lang = "zh" | "en";

const WORDS = {
  title: { zh: "上海斗地主", en: "Shanghai Dou Dizhu" },
  language: { zh: "English", en: "中文" },
  languageLabel: { zh: "Switch to English", en: "切换到中文" },
  yourName: { zh: "你的名字", en: "Your name" },
  signUp: { zh: "开始", en: "Start" },
  signedInAs: { zh: "玩家", en: "Playing as" },
  quickMatch: { zh: "快速开始", en: "Quick match" },
  quickMatchSaid: {
    zh: "与其他玩家同桌；无人时机器人补位。",
    en: "A table with other players; bots take the seats nobody takes.",
  },
  privateTable: { zh: "私人牌桌", en: "Private table" },
  privateTableSaid: {
    zh: "建一张只凭邀请链接加入的牌桌。私人牌桌的牌局不计等级分。",
    en: "A table only your invite link opens. Its hands are not rated.",
  },
  botsFill: { zh: "机器人补空位：", en: "Bots take the empty seats:" },
  afterSeconds: { zh: "{n} 秒后", en: "after {n} s" },
  never: { zh: "不补", en: "never" },
  unit: { zh: "底分", en: "Stake" },
  botLevel: { zh: "机器人", en: "Bots" },
  levelEasy: { zh: "简单", en: "easy" },
  levelNormal: { zh: "普通", en: "normal" },
  levelHard: { zh: "困难", en: "hard" },
  notifyMe: { zh: "轮到我时提醒", en: "Notify my turn" },
  waitingForTable: { zh: "正在找牌桌…", en: "Finding a table…" },
  cancel: { zh: "取消", en: "Cancel" },
  invite: { zh: "邀请链接", en: "Invite link" },
  inviteSaid: { zh: "把链接发给朋友：", en: "Send this link to your friends:" },
  joinInvite: { zh: "加入牌桌", en: "Join the table" },
  leaveTable: { zh: "离开牌桌", en: "Leave the table" },
  leaveDuringHand: {
    zh: "本局由系统代打到结束，然后你离开牌桌。",
    en: "The system plays your seat to the end of this hand; then you leave.",
  },
  left: { zh: "你已离开牌桌。", en: "You left the table." },
  closed: { zh: "牌桌已关闭。", en: "The table has closed." },
  waitingPlayers: { zh: "等待其他玩家…", en: "Waiting for players…" },
  dealing: { zh: "发牌中…", en: "Dealing…" },
  nextHandAt: { zh: "下一局即将开始", en: "The next hand starts soon" },
  you: { zh: "你", en: "You" },
  bot: { zh: "机器人", en: "Bot" },
  empty: { zh: "空位", en: "Empty seat" },
  seat: { zh: "座位", en: "Seat" },
  cards: { zh: "张", en: "cards" },
  bombsLeft: { zh: "可炸 {n} 次", en: "{n} bombs left" },
  landlord: { zh: "地主", en: "Landlord" },
  farmer: { zh: "农民", en: "Farmer" },
  markedCard: { zh: "标记牌", en: "Marked card" },
  bigJoker: { zh: "大", en: "BIG" },
  smallJoker: { zh: "小", en: "SMALL" },
  joker: { zh: "王", en: "JOKER" },
  bottom: { zh: "底牌", en: "Bottom" },
  shownHand: { zh: "摊牌", en: "Shown hand" },
  reported: { zh: "报到", en: "Reported" },
  systemPlays: { zh: "系统代打", en: "Played by the system" },
  takeBack: { zh: "收回代打", en: "Take my seat back" },
  toAct: { zh: "出牌中", en: "to act" },
  secondsLeft: { zh: "秒", en: "s" },
  passed: { zh: "不要", en: "Pass" },
  yourHand: { zh: "你的手牌", en: "Your hand" },
  selected: { zh: "已选", en: "selected" },
  play: { zh: "出牌", en: "Play" },
  pass: { zh: "不要", en: "Pass" },
  hint: { zh: "提示", en: "Hint" },
  clear: { zh: "重选", en: "Clear" },
  notLegal: { zh: "这手牌不能出", en: "Not a play you can make" },
  canOnlyPass: { zh: "没有能大过的牌", en: "Nothing beats it: pass" },
  bidding: { zh: "叫分", en: "Bidding" },
  bidPass: { zh: "不叫", en: "No bid" },
  bidValue: { zh: "{n} 分", en: "Bid {n}" },
  bids: { zh: "叫分", en: "Bids" },
  noBidYet: { zh: "未叫", en: "—" },
  showHandQuestion: {
    zh: "摊打：亮出全部手牌，倍数 ×2？",
    en: "摊打 (show hand): play face up for stakes ×2?",
  },
  showHandYes: { zh: "摊打 (×2)", en: "Show my hand (×2)" },
  showHandNo: { zh: "不摊", en: "Keep it hidden" },
  reportQuestion: { zh: "报到：", en: "报到 (report):" },
  reportPlay: {
    zh: "报到后打 (×2，输了不赔)",
    en: "Report, then play on (×2; you pay nothing if you lose)",
  },
  reportNoPlay: {
    zh: "报到不打 (立即获胜，按报到计分)",
    en: "Report and stop (you win now, scored by units)",
  },
  reportDecline: { zh: "不报", en: "Don't report" },
  waitingForOthers: { zh: "等待其他玩家出牌", en: "Waiting for the others" },
  yourTurn: { zh: "轮到你了", en: "Your turn" },
  handEnded: { zh: "本局结束", en: "The hand is over" },
  landlordWins: { zh: "地主胜", en: "The landlord wins" },
  farmersWin: { zh: "农民胜", en: "The farmers win" },
  multiplier: { zh: "倍数", en: "Multiplier" },
  bid: { zh: "叫分", en: "Bid" },
  factorMarkedJoker: { zh: "明王 ×2", en: "明王 marked joker ×2" },
  factorFirstBidThree: { zh: "头撂 ×4/3", en: "头撂 first bid 3 ×4/3" },
  factorShowHand: { zh: "摊打 ×2", en: "摊打 shown hand ×2" },
  factorReportPlay: { zh: "报到打 ×2", en: "报到 then play ×2" },
  factorReportNoPlay: { zh: "报到不打 ×{n} 组", en: "报到 and stop, ×{n} units" },
  factorBombs: { zh: "炸弹 {n} 个 ×{m}", en: "bombs: {n}, ×{m}" },
  noFactors: { zh: "无加倍", en: "no factors" },
  player: { zh: "玩家", en: "Player" },
  gross: { zh: "输赢", en: "Gross" },
  afterCap: { zh: "封顶后", en: "After cap" },
  cut: { zh: "系统得分", en: "Cut" },
  penalty: { zh: "掉线罚分", en: "Penalty" },
  net: { zh: "净得", en: "Net" },
  house: { zh: "系统", en: "House" },
  howCounted: { zh: "计分明细", en: "How it was counted" },
  nextHand: { zh: "继续", en: "Next hand" },
  scoreboard: { zh: "本桌积分", en: "At this table" },
  connecting: { zh: "正在连接…", en: "Connecting…" },
  connectionLost: { zh: "连接中断，正在重连…", en: "Connection lost: reconnecting…" },
  refused: { zh: "未能执行：", en: "Not done:" },
  hand: { zh: "第 {n} 局", en: "Hand {n}" },
  newPlayer: { zh: "换个名字", en: "Start over" },
} as const;

export type Word = keyof typeof WORDS;

export function say(lang: Lang, word: Word, values: Record<string, string | number> = {}): string {
  return WORDS[word][lang].replace(/\{(\w+)\}/g, (_, name: string) => String(values[name] ?? ""));
}

const SUITS: Record<string, { zh: string; en: string }> = {
  S: { zh: "黑桃", en: "spades" },
  H: { zh: "红桃", en: "hearts" },
  C: { zh: "梅花", en: "clubs" },
  D: { zh: "方块", en: "diamonds" },
};

/** A card as a screen reader says it. */
export function cardName(lang: Lang, code: string): string {
  if (code === "BJ") return lang === "zh" ? "小王" : "small joker";
  if (code === "RJ") return lang === "zh" ? "大王" : "big joker";
  const suit = SUITS[code[0] ?? ""]?.[lang] ?? "";
  const rank = rankLabel(code[1] ?? "");
  return lang === "zh" ? `${suit}${rank}` : `${rank} of ${suit}`;
}

export function rankLabel(rank: string): string {
  return rank === "T" ? "10" : rank;
}

/** A multiplier as players read it: an integer as it is, a fraction (`128/3`) as a
 * decimal of at most two places, with the fraction kept to be shown on demand. */
export function multiplierText(value: string): { decimal: string; fraction: string | null } {
  const [numerator, denominator] = value.split("/");
  if (denominator === undefined) return { decimal: value, fraction: null };
  const exact = Number(numerator) / Number(denominator);
  return { decimal: String(Math.round(exact * 100) / 100), fraction: value };
}
